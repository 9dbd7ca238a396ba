"""The embedded vLLM engine, model provisioning and KV-cache blending."""
