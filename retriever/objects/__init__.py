"""OpenAI's retrieval objects over the library: files, vector stores, stored responses, their
tables and cursor pages."""
