"""One run's report.html: the verdict, the plots, the lost writes explained, the evidence."""
