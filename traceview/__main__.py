from traceview.app.cli import main

main()
