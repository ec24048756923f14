"""Everything that touches Chainlit: the seam, the page pieces, the pipeline that renders a turn."""
