"""The CLI's commands, one module each, over the library API (cli.py loads them lazily).

A command parses its flags, calls the rooms that do the work and turns errors into one
line and an exit code. The only room allowed to import run/.
"""
