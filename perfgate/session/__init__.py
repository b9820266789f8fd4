"""One pytest session that asked for perfgate: its state (``state``: made once in
``pytest_configure``, kept in ``config.stash``), its baseline chosen from the options
(``baseline``), and the saver its run is saved through (``saver``)."""
