"""The sandbox's guest process: the init process of every sandbox (standalone stdlib scripts).

These files are copied into the environment's base dir and run inside the sandbox as
`python3 -I -S main.py`, so they import each other as top-level modules and use the stdlib only.
The host imports `wire` from here to speak the same protocol.
"""
