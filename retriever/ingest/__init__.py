"""From upload to chunks: text extraction (HTML, PDF; untrusted formats in a child process) and
chunking by the served model's tokenizer."""
