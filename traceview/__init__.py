"""traceview: GPU profiling trace analyzer (Nsight Compute, Nsight Systems, tegrastats, llama.cpp)."""

__version__ = "0.1.0"
