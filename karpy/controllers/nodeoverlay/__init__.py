"""The nodeoverlay controller: NodeOverlay status, and which overlays the catalog applies."""
