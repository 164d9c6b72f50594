"""The MCP server: the schedule tools and pulled follow-ups over the Model Context Protocol.

``agent`` holds the pull-based Agent port and needs nothing but asyncio; ``server`` wires it to the
official ``mcp`` SDK (the ``mcp`` extra), which only it imports; ``stdout`` is the wire the
server writes its messages to, and says which answers have been written.
"""
