"""Reaching Redis: clients and brokers, a Redis Cluster, an embedded redis-server, the Lua
scripts and typed replies. Everything else of the service talks to Redis through here."""
