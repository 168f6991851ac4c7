from rest_framework.permissions import BasePermission


class IsAdmin(BasePermission):
    """Staff users are HeteroFlow admins (SPEC §1)."""

    message = "admin (staff) users only"

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)
