"""What a model's tokens cost (Django-free): the kept price table, overridable by file."""
