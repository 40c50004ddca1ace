"""The registry assembled from every part's configuration block (above the domain packages, below assets)."""
