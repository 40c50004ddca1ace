"""The reports: one document model rendered as Markdown and HTML, plots, the generated reading, the paper
comparison, and the entry points that write them (:mod:`.publish`)."""
