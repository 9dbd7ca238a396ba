"""OpenAI's own RAG interface on ragblend's library: Files, Vector Stores and ``/v1/responses``
with the ``file_search`` tool. Request and response shapes come from the ``openai`` package."""
