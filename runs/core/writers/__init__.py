"""Files and text a run is written out as (Django-free): JSON, Markdown and JUnit results, the
CI gate's Markdown summary, the compare CSV.
"""
