"""A request-level simulation of a continuous-batching serving engine: requests arrive (a closed
loop of C clients, an open loop at a rate, or a trace), a scheduler in the shape of vLLM's V1
builds each step under a token budget over a paged KV cache, and every step's time comes from
the roofline engine's ops. See ``roofline.serving.simulation.run.simulate``."""
