"""A run folder's raw files → its figures: JMeter results (jmeter.py), PCP archives (pcp.py), GC logs
(gclog.py), combined per machine and compared in summary.py, told in sentences in prose.py."""
