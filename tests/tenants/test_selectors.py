import pytest
from django.contrib.auth import get_user_model

from tenants.models import TenantMembership
from tenants.selectors import tenant_of


@pytest.mark.django_db
def test_a_session_users_tenant_is_read_once_in_one_statement(tenant, django_assert_num_queries):
    user = get_user_model().objects.create_user(username="carol", password="x")
    TenantMembership.objects.create(user=user, tenant=tenant)
    user = get_user_model().objects.get(id=user.id)  # as a session loads it: the user alone

    with django_assert_num_queries(1):
        assert tenant_of(user) == tenant
        assert tenant_of(user) == tenant


@pytest.mark.django_db
def test_a_user_without_membership_has_no_tenant_and_is_not_read_again(django_assert_num_queries, admin_user):
    user = get_user_model().objects.create_user(username="dave", password="x")

    with django_assert_num_queries(1):
        assert tenant_of(user) is None
        assert tenant_of(user) is None
    with django_assert_num_queries(0):
        assert tenant_of(admin_user) is None
