"""Why writes were lost or transactions torn, told from the history and the decoded evidence."""
