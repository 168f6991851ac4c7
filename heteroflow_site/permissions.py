from django.contrib.auth.models import AbstractBaseUser
from rest_framework.permissions import BasePermission


def is_admin(user: AbstractBaseUser | None) -> bool:
    """Staff users are HeteroFlow admins: the one admin check of the API, the pages and the websockets."""
    return bool(user and user.is_authenticated and user.is_staff)


class IsAdmin(BasePermission):
    message = "admin (staff) users only"

    def has_permission(self, request, view) -> bool:
        return is_admin(request.user)
