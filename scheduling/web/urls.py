from django.contrib.auth import views as auth_views
from django.urls import path

from nodes import views as node_views
from scheduling.hardware.drain import NODE_MAINTENANCE
from scheduling.selectors import fractional_cards_held, node_card_holders
from scheduling.web import (
    dashboard_views,
    diagnostics_views,
    group_list_views,
    group_views,
    log_views,
    sharing_views,
    task_views,
    tenant_views,
    usage_views,
)

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="registration/login.html",
                                                redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(
        template_name="registration/password_reset_confirm.html", success_url="/reset/done/"),
        name="password_reset_confirm"),
    path("reset/done/", auth_views.PasswordResetCompleteView.as_view(
        template_name="registration/password_reset_complete.html"), name="password_reset_complete"),
    path("", dashboard_views.dashboard, name="dashboard"),
    path("tenants/", tenant_views.tenants_page, name="tenants"),
    path("tasks/", task_views.task_list, name="task-list"),
    path("tasks/new/", task_views.task_new, name="task-new"),
    path("tasks/<int:task_id>/", task_views.task_detail, name="task-detail"),
    path("tasks/<int:task_id>/log/", log_views.task_log_panel, name="task-log-panel"),
    path("diagnostics/", diagnostics_views.diagnostics, name="diagnostics"),
    path("sharing/", sharing_views.sharing_page, name="sharing"),
    path("usage/", usage_views.usage_page, name="usage"),
    path("groups/", group_list_views.group_list, name="group-list"),
    path("groups/new/", group_views.group_new, name="group-new"),
    path("groups/<int:group_id>/", group_views.group_detail, name="group-detail"),
    # The node list and page are the nodes app's; the tasks holding cards are this app's to say.
    path("nodes/", node_views.node_list, {"shares_held": fractional_cards_held}, name="node-list"),
    path("nodes/<int:node_id>/", node_views.node_page,
         {"card_holders": node_card_holders, "shares_held": fractional_cards_held, "maintenance": NODE_MAINTENANCE},
         name="node-detail"),
]
