"""The Docker (or Podman) engine: the SDK behind the Engine port, its payloads and errors
translated in one place, its clock and its log streams.
"""
