"""Gantry's worker runtime for builds of the hosted service's `flash` tool: stages the build's
artifact where flash's workers expect it, unpacks it and serves the resource it names
(docs/apps.md, "Flash workers")."""
