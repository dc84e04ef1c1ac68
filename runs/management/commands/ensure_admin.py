from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create the first staff user 'admin' when the database has no user. The password comes "
        "from HOLODECK_ADMIN_PASSWORD, else it is generated and kept in <data dir>/admin-password."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        password_file = settings.DATA_DIR / "admin-password"
        if users.objects.exists():
            if password_file.exists():
                self.stdout.write(f"log in as admin (password in {password_file})")
            return
        given = os.environ.get("HOLODECK_ADMIN_PASSWORD", "")
        password = given or secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "", password)
        if not given:
            password_file.parent.mkdir(parents=True, exist_ok=True)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
        self.stdout.write(
            self.style.SUCCESS(f"created staff user 'admin' with password: {password}")
        )
