from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group as AuthGroup
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from webapp.roles import ROLES


class Command(BaseCommand):
    help = "Create a user with one or more roles (researcher, annotator, auditor)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", action="append", choices=ROLES, required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument("--superuser", action="store_true", help="also give admin access")
        parser.add_argument("--if-missing", action="store_true", help="do nothing if the user exists")

    @transaction.atomic
    def handle(self, *args, username, role, password, email, superuser, if_missing, **options):
        users = get_user_model().objects
        if users.filter(username=username).exists():
            if if_missing:
                self.stdout.write(f"user {username!r} exists, left as it is")
                return
            raise CommandError(f"user {username!r} already exists")
        try:  # the validators the deployment configures (AUTH_PASSWORD_VALIDATORS), as a sign-up form runs them
            validate_password(password, user=users.model(username=username, email=email))
        except ValidationError as refused:
            raise CommandError(f"--password: {' '.join(refused.messages)}") from None
        user = users.create_user(username=username, email=email, password=password)
        if superuser:
            user.is_staff = user.is_superuser = True
            user.save()
        for name in role:
            user.groups.add(AuthGroup.objects.get_or_create(name=name)[0])
        self.stdout.write(f"created user {username!r} with roles {', '.join(role)}")
