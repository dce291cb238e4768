"""Pure core: value types, the incident state machine and the restart decision point."""
