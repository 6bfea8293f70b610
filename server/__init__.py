"""The HTTP/WebSocket environment server (app.py), its task registry (tasks.py), sessions (sessions.py), the serve
command (cli.py) and a Gymnasium client (client.py). Imports the CLI's option parser and every layer below it."""
