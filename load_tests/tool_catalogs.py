"""Tool catalogs as clients send them with every chat message: an agent framework's typed
tools, and a chat front end's built-in ones (Open WebUI's shape: 28 tools of about 800 bytes of
JSON each, built from documented Python functions, behind a system prompt that names the user
and the date)."""

from __future__ import annotations

from typing import Any

_VERBS = ("get", "search", "create", "update", "delete", "list", "send", "schedule")
_OBJECTS = ("weather", "flight", "invoice", "ticket", "calendar_event", "contact", "order",
            "repository", "document", "reminder", "payment", "shipment")  # fmt: skip
_FRONT_END_TOOLS = (
    ("search_web", "the public web", ("query", "count")),
    ("fetch_url", "a web page", ("url",)),
    ("generate_image", "a new image", ("prompt", "size")),
    ("edit_image", "an uploaded image", ("prompt", "image_id")),
    ("search_memories", "the user's saved memories", ("query", "count")),
    ("add_memory", "a memory about the user", ("content",)),
    ("update_memory", "a saved memory", ("memory_id", "content")),
    ("delete_memory", "a saved memory", ("memory_id",)),
    ("search_notes", "the user's notes", ("query", "count")),
    ("view_note", "one note", ("note_id",)),
    ("write_note", "a new note", ("title", "content")),
    ("replace_note_content", "a note's text", ("note_id", "content")),
    ("search_chats", "earlier conversations", ("query", "count")),
    ("view_chat", "one earlier conversation", ("chat_id",)),
    ("list_knowledge_bases", "the knowledge bases", ("count",)),
    ("search_knowledge_bases", "the knowledge bases by name", ("query", "count")),
    ("query_knowledge_files", "the files of the knowledge bases", ("query", "count")),
    ("view_knowledge_file", "one knowledge file", ("file_id",)),
    ("list_channels", "the workspace's channels", ("count",)),
    ("search_channel_messages", "messages in channels", ("query", "count")),
    ("view_channel_message", "one channel message", ("message_id",)),
    ("get_current_timestamp", "the current date and time", ()),
    ("calculate_timestamp", "a date relative to now", ("days", "hours")),
    ("run_code", "a Python snippet in a sandbox", ("code",)),
    ("list_files", "the files uploaded to this chat", ("count",)),
    ("view_file", "one uploaded file", ("file_id",)),
    ("summarize_file", "one uploaded file", ("file_id", "words")),
    ("translate_text", "a text into another language", ("content", "language")),
)
_PARAMETERS: dict[str, dict[str, Any]] = {
    "query": {"type": "string", "description": "What to look for, in the user's own words; "
              "rephrase a question into the keywords a search engine expects."},
    "count": {"type": "integer", "description": "How many results to return at most (default "
              "5); ask for more only when the first results are not enough."},
    "url": {"type": "string", "description": "The full address of the page, with its scheme."},
    "prompt": {"type": "string", "description": "A detailed description of the picture wanted: "
               "subject, style, colours and composition."},
    "size": {"type": "string", "description": "Width x height in pixels, such as 1024x1024."},
    "content": {"type": "string", "description": "The text to store, complete and self-contained "
                "so that it reads well on its own later."},
    "language": {"type": "string", "description": "The language to translate into, by name."},
    "title": {"type": "string", "description": "A short title that says what the note is for."},
    "code": {"type": "string", "description": "Python source; print what the user should see."},
    "days": {"type": "integer", "description": "Days to add (negative: into the past)."},
    "hours": {"type": "integer", "description": "Hours to add (negative: into the past)."},
    "words": {"type": "integer", "description": "About how many words the summary should have."},
}  # fmt: skip


def tool_catalog(count: int, catalog: int = 0) -> list[dict[str, Any]]:
    """``count`` distinct function tools with typed, described parameters, as agent frameworks
    declare them; each ``catalog`` number words the descriptions differently."""
    tools = []
    for index in range(count):
        verb, thing = _VERBS[index % len(_VERBS)], _OBJECTS[index // len(_VERBS) % len(_OBJECTS)]
        name = f"{verb}_{thing}" + (f"_{index}" if index >= len(_VERBS) * len(_OBJECTS) else "")
        parameters = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": f"Identifier of the {thing}."},
                "query": {"type": "string", "description": "Free text to match."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "sort": {"type": "string", "enum": ["newest", "oldest", "relevance"]},
                "include_archived": {"type": "boolean"},
            },
            "required": ["query"] if verb in ("search", "list") else ["id"],
        }
        description = f"{verb.capitalize()} a {thing.replace('_', ' ')} in workspace {catalog}."
        tools.append({"type": "function", "function": {
            "name": name, "description": description, "parameters": parameters}})  # fmt: skip
    return tools


def front_end_catalog(catalog: int = 0) -> list[dict[str, Any]]:
    """A chat front end's 28 built-in tools, as Open WebUI sends them with native function
    calling on: each a documented function whose docstring became the description and whose
    arguments became typed, described parameters; ``catalog`` words them per deployment."""
    tools = []
    for name, target, arguments in _FRONT_END_TOOLS:
        action = name.split("_")[0]
        description = (
            f"{action.capitalize()} {target} for the user (server {catalog}). Use this when the "
            f"user asks about {target} or when answering needs it; never invent what it would "
            "return. Returns JSON with the results, or an error message to report to the user. "
            "Prefer one precise call over several broad ones, do not call it again with the "
            "same arguments, and tell the user in plain words what was done with their data; "
            "results may be long, so quote only what answers the question."
        )
        properties = {argument: _PARAMETERS.get(argument, _identifier(argument))
                      for argument in arguments}  # fmt: skip
        required = [argument for argument in arguments if argument not in ("count", "size")]
        parameters = {"type": "object", "properties": properties, "required": required}
        tools.append({"type": "function", "function": {
            "name": name, "description": description, "parameters": parameters}})  # fmt: skip
    return tools


def front_end_system(user: str, date: str) -> str:
    """The system prompt a front end writes per chat: the user's name and today's date."""
    return (
        f"You are a helpful assistant talking with {user}. Today's date is {date}. Answer "
        "clearly and concisely; use the tools when the question needs fresh or private data."
    )


def _identifier(argument: str) -> dict[str, Any]:
    thing = argument.removesuffix("_id").replace("_", " ")
    return {"type": "string", "description": f"The id of the {thing}, as a tool returned it."}
