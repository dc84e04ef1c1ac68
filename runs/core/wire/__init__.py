"""The HoloDeck-compatible result format (Django-free): the wire models, the roll-ups that build
a case and a report from its turns, a turn's transcript events, reading HoloDeck result files,
and where a case's time went.
"""
