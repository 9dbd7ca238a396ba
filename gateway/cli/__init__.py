"""The ``ragblend`` command and its thin clients of a running server."""
