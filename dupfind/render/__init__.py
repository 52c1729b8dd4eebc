"""Renderers: terminal tables, JSON and Markdown views of dupfind's results."""
