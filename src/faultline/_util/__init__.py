"""Private helpers shared by the stages: text, files, YAML with line numbers, hashing."""
