"""What the page shows besides the answers' text: greeting, settings panel, notices, answer controls, exports."""
