"""The lakehouse commands: ``ktc ingest``, ``ktc sql``, ``ktc report``,
``ktc thriftserver``, ``ktc lake ...``.

| module         | what it holds                                                        |
|----------------|----------------------------------------------------------------------|
| ``registry``   | the commands, listed once: the collector's ``ktc`` and ``main`` use it |
| ``options``    | the options every command shares, parsed once into ``LakeOptions``   |
| ``common``     | progress lines, Spark sessions, Spark errors as one line             |
| ``output``     | query results as an aligned table, CSV or JSON lines                 |
| ``ingest``     | ``ktc ingest``                                                       |
| ``sql``        | ``ktc sql``                                                          |
| ``report``     | ``ktc report``                                                       |
| ``thriftserver`` | ``ktc thriftserver``                                               |
| ``lake``       | ``ktc lake compact|retention|expire|remove-orphans|snapshots``        |
| ``main``       | ``python -m exporters.lakehouse``: the commands without the collector |

The package imports nothing, and ``registry`` only click: the collector lists the
commands without loading the lakehouse's libraries (which may not be installed), and each
command imports Spark only when it runs.
"""
