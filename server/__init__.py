"""The HTTP/WebSocket environment server (app.py), its sessions (sessions.py) and a Gymnasium client (client.py)."""
