"""roofline: why an LLM is slow, and which hardware would fix it."""

__version__ = "0.1.0"
