"""Example custom scheduling plugins, registered in tests through HETEROFLOW_EXTRA_PLUGINS."""
