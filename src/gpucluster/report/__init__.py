"""Reports: one self-contained HTML file per command (`--html FILE`), with plots."""
