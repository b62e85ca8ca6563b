"""agentkit: structured block-diffusion decoding for agents."""
