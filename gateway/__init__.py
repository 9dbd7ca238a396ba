"""OpenAI-compatible HTTP front door of ragblend."""
