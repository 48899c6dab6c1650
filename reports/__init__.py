"""Reports: per-run report.html, suite comparisons, JUnit XML and the local results browser."""


class ReportsInputError(ValueError):
    """Bad input to a report command (a path without runs, a port in use): one line, exit code 3.

    Each module's own error (CompareError, ReportError, ServeError) is one of these, so the CLI can
    catch them all without importing matplotlib or http.server first.
    """
