"""The task suites (v0/, v1/: Harbor task folders; VERSIONS.md) and the scripts that measure and export them."""
