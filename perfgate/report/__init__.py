"""What is shown: tables, the history of a benchmark, the dashboard site, and what ``perfgate ab``
and the nightly print; matplotlib and plotly are imported only by what draws."""
