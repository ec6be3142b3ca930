"""Real containers for Sagebox: engine set-up (Docker Engine or podman), the serving image, and its check."""
