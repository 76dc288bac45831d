"""A tenant's projects (kpis.md 3e; architecture.md "Commercial"): operators and finance read
and write any tenant's, a tenant's members (and its `notify` tokens) their own; investors
none. A project of another tenant is a 404, never a 403."""

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, viewsets

from portal.access import Capability, tenant_get, user_may
from portal.models import ApiToken, Project, Scope
from portal.projects import project_create, project_get, project_list, project_update


class ProjectPermission(permissions.BasePermission):
    """Signed in with a role that reads tenant data (not investors); a token reads with
    `read` and writes with `notify` (a tenant's own configuration) or `admin`."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        safe = request.method in permissions.SAFE_METHODS
        if isinstance(request.auth, ApiToken):
            needed = {Scope.READ} if safe else {Scope.NOTIFY, Scope.ADMIN}
            if not needed & set(request.auth.scopes):
                wanted = "read" if safe else "notify' or 'admin"
                self.message = f"This token lacks the '{wanted}' scope."
                return False
        self.message = "Your role may not do this."
        return user_may(
            request.user, Capability.READ_TENANT_DATA if safe else Capability.WRITE_PROJECTS
        )


class ProjectSerializer(serializers.ModelSerializer):
    # Checked by the services (portal.projects), which name the field.
    slug = serializers.CharField(help_text="Unique in the tenant; never changes")
    name = serializers.CharField(required=False, allow_blank=True)
    cost_center = serializers.CharField(required=False, allow_blank=True, default="")

    class Meta:
        model = Project
        fields = ["slug", "name", "cost_center", "created_at"]
        read_only_fields = ["created_at"]


@extend_schema_view(
    list=extend_schema(summary="A tenant's projects", tags=["projects"]),
    retrieve=extend_schema(summary="One of a tenant's projects", tags=["projects"]),
    create=extend_schema(
        summary="Create a project (audited; at most 1,000 a tenant)",
        tags=["projects"],
        examples=[
            OpenApiExample(
                "Search",
                value={"slug": "search", "name": "Search", "cost_center": "CC-4410"},
                request_only=True,
            )
        ],
    ),
    partial_update=extend_schema(
        summary="Rename a project or change its cost center (audited)", tags=["projects"]
    ),
)
class ProjectViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """`/api/v1/tenants/<slug>/projects`: slug, name, cost_center; its members, operators
    and finance write them (a project is also created by the first usage event naming it)."""

    serializer_class = ProjectSerializer
    permission_classes = [ProjectPermission]
    lookup_field = "slug"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema's generation: no tenant
            return Project.objects.none()
        return project_list(user=self.request.user, tenant_slug=self.kwargs["tenant"])

    def get_object(self):
        return project_get(
            user=self.request.user, tenant_slug=self.kwargs["tenant"], slug=self.kwargs["slug"]
        )

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = project_create(
            tenant=tenant_get(user=self.request.user, slug=self.kwargs["tenant"]),
            slug=data["slug"],
            name=data.get("name") or data["slug"],
            cost_center=data.get("cost_center", ""),
            by=self.request.user,
        )

    def perform_update(self, serializer):
        serializer.instance = project_update(
            project=serializer.instance,
            changes=dict(serializer.validated_data),
            by=self.request.user,
        )
