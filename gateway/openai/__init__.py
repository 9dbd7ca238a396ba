"""OpenAI's API shapes: request bodies and sampling of completions and chat, and the Files,
Vector Stores and ``/v1/responses`` objects on ragblend's library, built from the ``openai``
package's own types."""
