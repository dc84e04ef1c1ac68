"""The run page's text search through an index (``runs.selectors.text_search``): PostgreSQL's
``pg_trgm`` and a GIN trigram index on each response column, SQLite's FTS5 trigram tables kept
in step by triggers. Where the database cannot (no extension for this user, no FTS5), the log
says so and the search scans the responses as before: the migration does not fail."""

from django.db import migrations

from runs.selectors.text_search import text_index_create, text_index_drop


class Migration(migrations.Migration):
    dependencies = [("runs", "0020_reviews")]

    operations = [migrations.RunPython(text_index_create, text_index_drop)]
